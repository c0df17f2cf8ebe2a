"""Container images: which image, what is inside, does it run on a target (`gpuresolve image`).

``reference`` parses an image reference, ``facts`` loads ``data/images.yaml`` (how the official
pytorch/pytorch images and NVIDIA's NGC PyTorch containers are built, graded), ``evaluate`` says
what an image holds and whether it runs by the solver's own rules.
"""

__all__: list[str] = []  # a namespace: import its modules
