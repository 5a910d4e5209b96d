"""The fedloom ClientApp that ``flwr run`` loads on every SuperNode (``deploy/flower/pyproject.toml``).

Each message is answered by `fedloom.apps.node.answer`: in this process, or, when the node config
names a ``worker`` socket, by the node's persistent worker (`fedloom.runtime.flower.worker`), which
keeps the backbone loaded between messages. Rounds under secure aggregation go through Flower's
`secaggplus_mod` here, in the ClientApp, before and after the answer. This module imports only
Flower and the standard library, so the fresh process Flower starts for each message stays light
when a worker does the work.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from flwr.app import Context, Message
from flwr.client.mod import secaggplus_mod
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import ClientAppCallable, Mod
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS

from fedloom.runtime.flower.relay import WorkerUnavailableError, relay


def reply(msg: Message, context: Context) -> Message:
    """Answer ``msg`` as this node: relayed to its worker if it has one, else here."""
    kind, node = msg.metadata.message_type.split(".")[0], dict(context.node_config)
    if "worker" in node:
        try:
            content = relay(str(node["worker"]), kind, msg.content, node)
        except WorkerUnavailableError as exc:  # its message names the socket: for the node's log only
            logging.getLogger(__name__).error("%s", exc)
            raise WorkerUnavailableError("this node's fedloom node worker is not running; its owner's log "
                                         "says where it was expected") from None  # fmt: skip
    else:
        from fedloom.apps.node import answer  # torch and the model: only when there is no worker

        content = answer(kind, msg.content, node)
    return Message(content, reply_to=msg)


def secure_aggregation_mod(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """Flower's SecAgg+ client protocol for the messages of a secure round (they carry its stage);
    every other message passes straight through."""
    if RECORD_KEY_CONFIGS in msg.content.config_records:
        return secaggplus_mod(msg, context, call_next)
    return call_next(msg, context)


def make_client_app(mods: Sequence[Mod] = ()) -> ClientApp:
    """The ClientApp: one data owner per node; everything it needs arrives in the messages.
    ``mods``: extra Flower mods, applied inside the SecAgg+ one."""
    app = ClientApp(mods=[secure_aggregation_mod, *mods])
    for register in (app.query, app.train, app.evaluate):
        register()(reply)
    return app


client_app = make_client_app()
