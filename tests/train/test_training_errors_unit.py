"""A user's error inside training, translated into its line (distexp.train.diagnose,
errors.first_line) on exceptions made here, without TensorFlow. The cases themselves:
tests/train/test_training_errors.py. Tier: unit."""
from __future__ import annotations

from omegaconf import OmegaConf

KERAS_CALL = ("Exception encountered when calling Sequential.call().\n\n\x1b[1mInput 0 of layer "
              "\"dense\" is incompatible with the layer: expected axis -1 of input shape to have "
              "value 64, but received input with shape (None, 8, 8, 1)\x1b[0m\n\nArguments "
              "received by Sequential.call():\n  \u2022 inputs=tf.Tensor(shape=(None, 8, 8, 1))\n"
              "  \u2022 kwargs=<class 'inspect._empty'>")


TF_OP = ("Graph execution error:\n\nDetected at node Sparse/Sparse defined at (most recent call "
         "last):\n  File \"/x/step.py\", line 65, in replica_step\n\nReceived a label value of 12 "
         "which is outside the valid range of [0, 10).  Label values: 0 12 3\n\t [[{{node "
         "Sparse/Sparse}}]] [Op:__inference__one_step_441]")


def _cfg(**dataset):
    return OmegaConf.create({"model": {"name": "cnn", "factory": None},
                             "dataset": {"name": "custom", "factory": "mydata:load",
                                         "num_classes": 10, **dataset},
                             "task": {"factory": None}})


def test_the_exceptions_own_line_not_a_wrappers():
    """Keras' "Exception encountered when calling" and TensorFlow's node stack wrap the message;
    the log's last line was `• kwargs=<class 'inspect._empty'>` or the node's name."""
    from distexp.errors import first_line

    assert first_line(ValueError(KERAS_CALL)).startswith('Input 0 of layer "dense" is incompatible')
    assert first_line(ValueError(TF_OP)).startswith("Received a label value of 12 which is outside")


def test_a_label_out_of_range_from_tensorflow_names_the_key():
    """On CPU TensorFlow's sparse cross-entropy finds it mid-step: the same line as the check."""
    from distexp.errors import UserError
    from distexp.train.diagnose import explain

    ex = explain(ValueError(TF_OP), _cfg())
    assert isinstance(ex, UserError)
    assert str(ex) == ("labels: received 12 with 10 classes (dataset.num_classes=10, labels from "
                       "mydata:load); valid: class ids 0..9: raise num_classes to the number of "
                       "classes, or fix the labels")


def test_anything_else_is_its_own_first_line():
    """Not the user's code, not known: a failure (exit 1) with the exception's type and first line."""
    from distexp.errors import UserFailure
    from distexp.train.diagnose import explain

    ex = explain(RuntimeError("the first line\nand more\nlast line"), _cfg())
    assert isinstance(ex, UserFailure) and str(ex) == "RuntimeError: the first line"


def test_one_first_line_helper_cut_where_its_caller_says():
    """errors.first_line is the one "exception as one line": the console's 300 characters, a sweep
    record's 500, the sweep summary's 200, uncut for Hydra's messages; text works as an exception."""
    from distexp.errors import first_line

    long = ValueError("\n  " + "x" * 600 + "\nmore")
    assert first_line(long) == "x" * 297 + "..."
    assert first_line(long, 500) == "x" * 497 + "..." and len(first_line(long, 200)) == 200
    assert first_line(long, None) == "x" * 600
    assert first_line("Could not load 'x'\n  File y.py") == "Could not load 'x'"
    assert first_line(RuntimeError()) == "RuntimeError" and first_line("") == ""
