# solution: amp-train-step
# fails: amp-train-step-autocast amp-train-step-scaled-backward amp-train-step-scaler-step amp-train-step-update amp-train-step-zero-grad amp-train-step-skip-inf amp-train-step-returns amp-train-step-converges
# says: backward ran twice through the same graph
# Typical mistake: loss.backward() and then scaler.scale(loss).backward() without retain_graph: torch raises on the second.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    loss.backward()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
