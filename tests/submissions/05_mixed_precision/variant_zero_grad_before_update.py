# solution: amp-train-step
# fails:
# Correct variant: zero_grad between scaler.step and scaler.update, loss value read before backward.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    with torch.amp.autocast(device_type, dtype):
        loss = loss_fn(model(x), y)
    value = loss.detach().cpu().item()
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.step(optimizer)
    optimizer.zero_grad()
    scaler.update()
    return value
