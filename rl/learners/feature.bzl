"""`rl_learner_feature`: one feature folder of rl/learners (a loss term, its Learner, its module) in one line.

    load(":feature.bzl", "rl_learner_feature")

    rl_learner_feature(
        name = "aux_prediction",               # the folder: aux_prediction/*.py, aux_prediction/tests/*_test.py
        deps = [":aux_heads", ":ppo_learner", "//rl/losses"],
        slow_tests = [],                       # test names (file stem) that train for minutes: tagged "slow"
    )

The folder's sources are one py_library named after it; each `tests/<name>_test.py` is a test
`:<name>_test` that may use every Learner (`:learners`) and the test environments (`:test_support`).
A new file in the folder needs no BUILD change (rl/learners/AGENTS.md, "Adding a loss").
"""

load("//tools/rules:defs.bzl", "rl_py_test")

def rl_learner_feature(name, deps, slow_tests = []):
    native.py_library(
        name = name,
        srcs = native.glob([name + "/*.py"]),
        deps = deps,
    )
    for test in native.glob([name + "/tests/*_test.py"]):
        test_name = test.split("/")[-1][:-len(".py")]
        rl_py_test(
            name = test_name,
            srcs = [test],
            tags = ["slow"] if test_name in slow_tests else [],
            deps = [
                ":" + name,
                ":learners",
                ":test_support",
            ],
        )
