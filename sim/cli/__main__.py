"""``python -m moesim.cli``: the same as the ``moesim`` command."""

from moesim.cli.main import main

if __name__ == "__main__":
    main()
