# solution: amp-clip-step
# fails: amp-clip-step-clips amp-clip-step-unscaled amp-clip-step-scaler amp-clip-step-amp
# says: did nothing
# Redefining the checks (`check`, `passed`, `solved`, a fake `ch05`) plus a step that does nothing: every check still fails.
import types


def check(*args, **kwargs):
    pass


def passed(*args, **kwargs):
    print("all checks passed")


def solved(fn, *args, **kwargs):
    return 0.0


ch05 = types.SimpleNamespace(**{name: (lambda *a, **k: None) for name in
                                ("check_clips", "check_clips_unscaled", "check_clip_scaler", "check_still_amp")})


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    return 0.0
