"""Phasic Policy Gradient (imported through rl.learners): PPGConfig, PPG and PPGTorchLearner."""
