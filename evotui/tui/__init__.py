"""The Textual front end. Only this package (and evotui.bench_ui) imports textual."""
