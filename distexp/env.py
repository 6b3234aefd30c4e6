"""The environment variables distexp's processes pass each other: process plumbing, not settings
(docs/architecture.md lists them), and the one test aid read from the environment. A leaf: it
imports nothing."""

TASK = "DISTEXP_TASK"                    # which process of the job this is (names its user-error file)
METRICS_SINK = "DISTEXP_METRICS_SINK"    # the chief appends its metrics/params here (JSON lines)
TRACKING_GATE = "DISTEXP_TRACKING_GATE"  # the job writes "ok <run_id>" or "error <line>" here
PARITY = "DISTEXP_PARITY"                # set by distexp.parity: write the first step's gradient norm
TFDS_MOCK = "DISTEXP_TFDS_MOCK"          # test aid: TFDS data under tfds.testing.mock_data(num_examples=N)
