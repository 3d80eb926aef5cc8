# solution: amp-train-step
# fails: amp-train-step-converges amp-train-step-skip-inf
# says: zero_grad
# Typical mistake: the gradients are cleared between backward and the step, so nothing is learned.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    optimizer.zero_grad(set_to_none=False)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
