"""The report process (``python -m distexp.report``; no TensorFlow here): reading the runs, the
scaling table, the plots."""
