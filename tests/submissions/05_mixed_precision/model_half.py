# solution: amp-train-step
# fails: amp-train-step-autocast amp-train-step-scaled-backward amp-train-step-scaler-step amp-train-step-update amp-train-step-zero-grad amp-train-step-skip-inf amp-train-step-returns amp-train-step-converges
# says: model.half()
# Typical mistake: the old recipe: convert the model to the low-precision dtype instead of using autocast.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    model.to(dtype)
    optimizer.zero_grad()
    loss = loss_fn(model(x.to(dtype)), y.to(dtype))
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
