"""The Python API: evotui.optimize (api), stored-run administration (admin), the GEPA-shaped result (result)."""
