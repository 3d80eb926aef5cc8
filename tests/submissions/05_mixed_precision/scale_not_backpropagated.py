# solution: amp-train-step
# fails: amp-train-step-scaled-backward
# says: scaler.scale(loss).backward()
# Typical mistake: the loss is scaled, but backward runs on the unscaled loss.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaled_loss = scaler.scale(loss)
    loss.backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
