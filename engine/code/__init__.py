"""Program text tooling: tree-sitter parsing, EVOLVE-BLOCK regions, patches, cheap filters."""
