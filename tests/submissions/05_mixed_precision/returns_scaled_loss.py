# solution: amp-train-step
# fails: amp-train-step-returns
# says: unscaled
# Typical mistake: the scaled loss is returned (it is the scale times too large).
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.step(optimizer)
    scaler.update()
    return scaled.item()
