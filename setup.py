"""The optional C reader of the plainest streamed chat answers; everything else is in pyproject.toml.

``infertap._chatsse`` (native/chatsse.c, with yyjson 0.12.0 vendored in native/yyjson) reads those
answers several times faster than Python. It is optional: where it can't be built (no C compiler, no
Python headers) the install goes on without it, and infertap reads every answer in Python
(infertap/apis/chat_stream.py), as it did before. Python's own flags, nothing tuned to this CPU
(no -march=native): a wheel runs elsewhere. Build it in place with ``python setup.py build_ext --inplace``.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "infertap._chatsse",
            sources=["native/chatsse.c", "native/yyjson/yyjson.c"],
            include_dirs=["native/yyjson"],
            depends=["native/yyjson/yyjson.h"],
            define_macros=[
                ("YYJSON_DISABLE_WRITER", "1"),
                ("YYJSON_DISABLE_INCR_READER", "1"),
                ("YYJSON_DISABLE_UTILS", "1"),
                ("YYJSON_DISABLE_NON_STANDARD", "1"),  # RFC 8259 JSON only, as msgspec reads it
            ],
            optional=True,
        )
    ]
)
