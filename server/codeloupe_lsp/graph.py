"""placeholder"""


def register(server) -> None:
    pass
