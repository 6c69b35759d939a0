"""The Textual front end. Only this package (and evotui.bench.ui) imports textual."""
