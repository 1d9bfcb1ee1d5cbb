"""The one error the engine package raises: its message says what is wrong and what to do."""


class EngineError(RuntimeError):
    pass
