# solution: amp-train-step
# fails: amp-train-step-scaled-backward amp-train-step-converges
# says: backward ran more than once
# Typical mistake: loss.backward() and then scaler.scale(loss).backward(): the gradients add up, (1 + 1/scale) times the true ones.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    loss.backward(retain_graph=True)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
