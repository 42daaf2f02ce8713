"""The helper process of viewer.py: its own `main`, burning CPU with
viewer.py's burn, and a small allocation so that gpuflame profiles it."""
import sim_torch
from viewer import burn


def main():
    kept = sim_torch.empty(1 << 20)
    burn(0.4)
    return kept


if __name__ == "__main__":
    main()
