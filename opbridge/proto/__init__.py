"""The lite Caffe schema (``caffe.proto``) and its generated module ``caffe_pb2``.

Only the parsers import this package (and so protobuf).
"""
