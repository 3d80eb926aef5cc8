# solution: amp-train-step
# fails:
# Correct variant: a branch for a disabled scaler, model.train(), loss in fp32 from the low-precision output.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        out = model(x)
        loss = loss_fn(out.float(), y)
    if scaler is not None and scaler.is_enabled():
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss.item()
