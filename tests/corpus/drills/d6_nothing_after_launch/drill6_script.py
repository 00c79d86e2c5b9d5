script = """
import torch
from course import load_cuda, device
module = load_cuda(far_src, cpp_src, ["rgb_to_grayscale"])
x = torch.randint(0, 256, (3, 1, 251), dtype=torch.uint8, device=device())
grey = module.rgb_to_grayscale(x)
print("launched")
"""
