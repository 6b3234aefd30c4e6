"""Datasets: the built-in loaders, user and TFDS datasets, text pairs, tf.data pipelines."""
