# solution: amp-clip-step
# fails: amp-clip-step-unscaled amp-clip-step-clips amp-clip-step-scaler amp-clip-step-amp
# says: write it yourself
# Delegation: helpers.amp.scaled_step(..., max_norm=...) clips too; imported by name, it still earns nothing.
from helpers.amp import scaled_step as course_step


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    return course_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm=max_norm)
