"""Export / import of Serve config files."""

from __future__ import annotations

import copy

import pytest
import yaml

from backend.deploy.config_io import (APP_FIELDS, DEPLOY_FIELDS, DEPLOYMENT_FIELDS, ConfigFileError,
                                      apply_config, export_application, parse_config)
from backend.deploy.deployer import wait_for_app


def test_field_lists_match_rays_schema():
    from ray.serve.schema import DeploymentSchema, ServeApplicationSchema, ServeDeploySchema

    assert DEPLOY_FIELDS == set(ServeDeploySchema.model_fields)
    assert APP_FIELDS == set(ServeApplicationSchema.model_fields)
    assert DEPLOYMENT_FIELDS == set(DeploymentSchema.model_fields)


@pytest.mark.parametrize("text,expected", [
    ("applications: [", "not valid YAML at line"),
    ("- a\n- b\n", "must be a mapping"),
    ("applications: []\n", "names no applications"),
    ("applicaitons: []\n", "unknown top-level field(s) applicaitons"),
    ("applications:\n- name: a\n", "has no 'import_path'"),
    ("applications:\n- name: a\n  import_path: x:y\n  route: /a\n", "unknown field(s) route"),
    ("applications:\n- name: a\n  import_path: x:y\n  deployments:\n  - name: D\n"
     "    max_batch_size: 4\n", "('D'): unknown field(s) max_batch_size"),
    ("applications:\n- {name: a, import_path: 'x:y'}\n- {name: a, import_path: 'x:y'}\n",
     "twice"),
])
def test_bad_files_are_refused_clearly(text, expected):
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "tuned.yaml")
    assert expected in str(info.value)
    assert str(info.value).startswith("tuned.yaml")


def test_export_then_import_round_trip(cluster_client, tuning_app, batched_demo):
    app, dep, _ = tuning_app
    details = cluster_client.serve_details()
    text = export_application(details, app)
    doc = parse_config(text)
    assert doc["applications"][0]["name"] == app
    assert doc["http_options"] == details["http_options"]
    # What `serve deploy` would check: Ray's own schema accepts the file.
    from ray.serve.schema import ServeDeploySchema
    ServeDeploySchema.model_validate(yaml.safe_load(text))

    # Import a tuned variant: only the named application changes.
    tuned = copy.deepcopy(doc)
    tuned["applications"][0]["deployments"][0]["max_ongoing_requests"] = 40
    before = copy.deepcopy(cluster_client.serve_details())
    assert apply_config(cluster_client, tuned) == [app]
    wait_for_app(cluster_client, app, timeout_s=120)
    after = cluster_client.serve_details()
    assert after["applications"][app]["deployed_app_config"]["deployments"][0][
        "max_ongoing_requests"] == 40
    for name, a in before["applications"].items():
        if name != app:
            assert after["applications"][name]["deployed_app_config"] == a["deployed_app_config"]
