# solution: amp-train-step
# fails: amp-train-step-autocast
# says: autocast
# Typical mistake: only the loss is computed under autocast; the forward pass stays in fp32.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    output = model(x)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(output, y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
