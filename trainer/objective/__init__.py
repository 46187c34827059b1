"""The update and its algorithms: the objective term by term (DeepSeekMath eq. 3), advantage estimators, policy losses, KL estimators, the presets, importance corrections, the distillation loss."""
