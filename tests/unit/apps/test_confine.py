"""A node confines the coordinator's data paths to its own data folder: every marked field, checked
lexically and through symbolic links, anchored where a reader would also look in the working directory."""

from __future__ import annotations

import pytest

from fedloom.apps.confine import confine, data_paths
from fedloom.errors import NodeRefusedError
from fedloom.runs.config import RunConfig


def test_every_field_that_names_a_file_or_folder_is_marked():
    """A new path-like field without the mark would be read wherever the coordinator points it."""
    marked = {".".join(key) for key, _ in data_paths(RunConfig)}
    assert {"data.generic.path", "data.acl18.folder", "data.bigdata22.prices_file", "data.bigdata22.sectors_file",
            "data.text.coedit_folder", "adapter.init_from"} <= marked  # fmt: skip

    def names(model, prefix=""):
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and hasattr(ann, "model_fields"):
                yield from names(ann, f"{prefix}{name}.")
            else:
                yield f"{prefix}{name}"

    pathlike = {n for n in names(RunConfig) if n.rsplit(".", 1)[-1].endswith(("folder", "file", "path", "_from"))}
    assert pathlike <= marked, pathlike - marked


@pytest.mark.parametrize("value", ["/outside/payroll.csv", "../payroll.csv", "panel/../../payroll.csv", "~/x.csv"])
def test_a_path_out_of_the_data_folder_is_refused_by_key(tmp_path, value):
    raw = {"dataset": "generic", "data": {"generic": {"path": value}}}
    with pytest.raises(NodeRefusedError, match=r"^data\.generic\.path: a node reads only inside") as err:
        confine(raw, tmp_path)
    assert value not in str(err.value)


def test_a_symbolic_link_out_of_the_data_folder_is_refused(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "payroll.csv").write_text("name,salary\nAlice,1\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "panel.csv").symlink_to(tmp_path / "outside" / "payroll.csv")
    (tmp_path / "data" / "acl18").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(NodeRefusedError, match=r"data\.generic\.path: leads out"):
        confine({"data": {"generic": {"path": "panel.csv"}}}, tmp_path / "data")
    with pytest.raises(NodeRefusedError, match=r"data\.acl18\.folder: leads out"):
        confine({"data": {"acl18": {"folder": "acl18"}}}, tmp_path / "data")


def test_the_node_folder_replaces_the_coordinators_and_cwd_readers_are_anchored(tmp_path):
    raw = {"backbone": "tiny-random-llama", "data": {"data_dir": "/coordinator/data",
           "generic": {"path": "panel.csv"}, "acl18": {"folder": "acl18"}}}  # fmt: skip
    got = confine(raw, tmp_path)
    assert got["data"]["data_dir"] == str(tmp_path)
    assert got["data"]["generic"]["path"] == str(tmp_path / "panel.csv")  # never the node's working directory
    assert got["data"]["acl18"]["folder"] == "acl18"  # joined to the data folder by its reader (and manifest)
    assert got["backbone"] == "tiny-random-llama"
    assert raw["data"]["data_dir"] == "/coordinator/data"  # the message's config is not changed


def test_a_backbone_path_must_lie_in_the_data_folder(tmp_path):
    with pytest.raises(NodeRefusedError, match=r"^backbone: a node reads only inside"):
        confine({"backbone": "/home/owner/secret-model"}, tmp_path)
    assert confine({"backbone": "models/mine"}, tmp_path)["backbone"] == str(tmp_path / "models" / "mine")


def test_without_a_data_folder_a_node_reads_no_path():
    with pytest.raises(NodeRefusedError, match=r"data\.generic\.path: this node has no data folder"):
        confine({"data": {"generic": {"path": "panel.csv"}}}, None)


def test_a_config_that_is_not_a_mapping_is_refused(tmp_path):
    for raw in ("text", ["a"], {"data": "x"}):
        with pytest.raises(NodeRefusedError, match="not a mapping"):
            confine(raw, tmp_path)
