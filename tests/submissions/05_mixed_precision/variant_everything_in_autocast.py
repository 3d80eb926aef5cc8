# solution: amp-train-step
# fails:
# Correct variant: the whole step inside the autocast block, explicit unscale_, autograd.backward.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    with torch.autocast(device_type, dtype=dtype):
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        torch.autograd.backward(scaler.scale(loss))
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
    return loss.float().item()
