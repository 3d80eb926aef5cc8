# solution: amp-train-step
# fails:
# Correct variant: model.zero_grad() at the start, backward inside autocast, torch.GradScaler type hint.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler: torch.GradScaler, device_type, dtype):
    model.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype):
        loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach().item()
