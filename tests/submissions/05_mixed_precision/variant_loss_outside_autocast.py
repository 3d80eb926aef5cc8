# solution: amp-train-step
# fails:
# Correct variant: forward inside autocast, loss outside it (on the low-precision output), zero_grad at the end.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    with torch.autocast(device_type=device_type, dtype=dtype):
        output = model(x)
    loss = loss_fn(output, y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()
