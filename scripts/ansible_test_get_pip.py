"""Stand-in for the pip bootstrap script that ansible-test downloads from a
host CI machines cannot reach: installs pip with the interpreter's own
ensurepip, then the requested pip version from the package index."""
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"],
                      stdout=subprocess.DEVNULL)
args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + args))
