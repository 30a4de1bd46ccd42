"""Quiet progress output for every test and every notebook kernel nbval
starts (kernels inherit this environment), so stored outputs stay exact."""
import os

os.environ["IPP_NONINTERACTIVE"] = "1"
