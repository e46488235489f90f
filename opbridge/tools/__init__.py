"""Tools built on the public API: the documentation generator (``python -m
opbridge.tools.gendocs``) and Caffe random weights (:mod:`opbridge.tools.caffe_weights`)."""
