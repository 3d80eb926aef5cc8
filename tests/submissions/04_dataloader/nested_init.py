# solution: seed-numpy-worker
# fails: worker-init-spawn
# says: nested function
def make_seeder():
    def seed_numpy_worker(worker_id):
        info = get_worker_info()
        info.dataset.rng = np.random.default_rng(info.seed)
    return seed_numpy_worker


seed_numpy_worker = make_seeder()
