# solution: amp-train-step
# fails: amp-train-step-autocast amp-train-step-scaled-backward amp-train-step-scaler-step amp-train-step-update amp-train-step-zero-grad amp-train-step-skip-inf amp-train-step-returns amp-train-step-converges
# says: `scaler.scale(loss)` only returns the scaled loss
# Typical mistake: scaler.scale(loss) with no .backward(): there are no gradients for scaler.step to check.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
