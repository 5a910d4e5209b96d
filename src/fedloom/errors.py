"""The one exception family of fedloom: every user-facing failure is a `FedloomError` whose message
names what is wrong, where (config path, file, client, tensor key), and what to do about it."""


class FedloomError(Exception):
    """Base class. The CLI prints the message on one line and exits with status 2."""


class ConfigError(FedloomError):
    """A configuration value, key or file is invalid."""


class BackboneNotFoundError(FedloomError):
    """No frozen model could be found under the requested name or path."""


class DataError(FedloomError):
    """A dataset, split or partition is missing or malformed."""


class UploadError(FedloomError):
    """A client upload does not match what the server expects."""


class NodeRefusedError(FedloomError):
    """A data owner's node refuses a message; the message is written to be sent back to the coordinator,
    so it names config keys and never the node's files, paths or data."""
