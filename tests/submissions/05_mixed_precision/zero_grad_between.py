# solution: amp-train-step
# fails: amp-train-step-autocast amp-train-step-scaled-backward amp-train-step-scaler-step amp-train-step-update amp-train-step-zero-grad amp-train-step-skip-inf amp-train-step-returns amp-train-step-converges
# says: cleared between backward and the step
# Typical mistake: optimizer.zero_grad() between backward and scaler.step: GradScaler asserts "No inf checks were recorded for this optimizer."
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    optimizer.zero_grad()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
