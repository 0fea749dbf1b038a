"""The platform's hub-side loggers write in the hub's format, INFO included, once each."""

import logging

import pytest

from hub_ext.core.logs import LOGGER, use_hub_format

pytestmark = pytest.mark.unit


def test_platform_lines_look_like_the_hubs_and_are_written_once(capsys):
    logger = logging.getLogger(LOGGER)
    before = list(logger.handlers)
    for h in before:
        logger.removeHandler(h)
    try:
        use_hub_format()
        use_hub_format()
        assert len(logger.handlers) == 1
        logging.getLogger("mlplatform.provision").info("project vision provisioned")
        logging.getLogger("mlplatform.login").warning("groups_claim cannot be checked")
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 2, lines
        assert lines[0].startswith("[I ") and "mlplatform.provision" in lines[0]
        assert lines[0].endswith("] project vision provisioned")
        assert lines[1].startswith("[W ") and lines[1].endswith("] groups_claim cannot be checked")
    finally:
        for h in list(logger.handlers):
            logger.removeHandler(h)
        for h in before:
            logger.addHandler(h)
