"""The environment variables distexp's processes pass each other: process plumbing, not settings
(docs/architecture.md lists them), and the two test aids read from the environment. No
`DISTEXP_*` name is spelt anywhere else (tests/project/test_vocabularies.py). A leaf: it imports nothing."""

TASK = "DISTEXP_TASK"                    # which process of the job this is (names its user-error file)
METRICS_SINK = "DISTEXP_METRICS_SINK"    # the chief appends its metrics/params here (JSON lines)
TRACKING_GATE = "DISTEXP_TRACKING_GATE"  # the job writes "ok <run_id>" or "error <line>" here
PARITY = "DISTEXP_PARITY"                # set by distexp.parity: write the first step's gradient norm
NETNS = "DISTEXP_NETNS"                  # cluster=local: the network namespace a trainer joins (distexp.cluster.netns)
PROGRESS = "DISTEXP_PROGRESS"            # the chief trainer's progress form: bar, lines or quiet
TFDS_MOCK = "DISTEXP_TFDS_MOCK"          # test aid: TFDS data under tfds.testing.mock_data(num_examples=N)
TEST_HOLD = "DISTEXP_TEST_HOLD"          # test aid: hold a process at a phase (distexp.stops.hold)
PREFIX = "DISTEXP_"                      # every name above: what a process sent to another node forwards
