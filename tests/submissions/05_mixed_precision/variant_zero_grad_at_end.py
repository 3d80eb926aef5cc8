# solution: amp-train-step
# fails:
# Correct variant: zero_grad (set_to_none=False) at the end, loss outside autocast, torch.amp.autocast.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    with torch.amp.autocast(device_type=device_type, dtype=dtype):
        output = model(x)
    loss = loss_fn(output.float(), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=False)
    return float(loss.detach())
