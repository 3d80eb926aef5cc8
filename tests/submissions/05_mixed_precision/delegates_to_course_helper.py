# solution: amp-train-step
# fails: amp-train-step-autocast amp-train-step-scaled-backward amp-train-step-scaler-step amp-train-step-update amp-train-step-zero-grad amp-train-step-skip-inf amp-train-step-returns amp-train-step-converges
# says: write it yourself
# Delegation: the course's own helpers.amp.scaled_step does the whole step; calling it earns nothing.
from helpers import amp


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    return amp.scaled_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype)
