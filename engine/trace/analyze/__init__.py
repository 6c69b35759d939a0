"""`evotui analyze`: lineage (lineage.py), cycling (cycling.py), edit types by an LLM judge
(edits.py, judge.py), and the terminal / HTML report (report.py, html.py)."""
