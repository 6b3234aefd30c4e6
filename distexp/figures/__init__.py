"""Figures and their statistics, without TensorFlow at import: the step-time meter, FLOPs, peaks,
intervals and verdicts, what an accuracy means."""
