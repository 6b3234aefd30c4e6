"""Records of the options of the model, dataset, loop and optimizer groups (as strategies and
cluster kinds are records): what distexp knows about each before TensorFlow starts, asked by
the checks, `--help`, the run's params, the display and the report; the implementation is named
lazily ("package.module:function"). No TensorFlow."""
