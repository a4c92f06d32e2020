"""Asking the Hugging Face Hub once, without retries, before anything heavy: is it reachable (`push`, `--dataset`),
and is a Hub model id there (`translate`)? One line naming the address and `HF_HUB_OFFLINE` otherwise."""

from __future__ import annotations

HUB_CHECK_TIMEOUT_S = 5.0


# commands whose --dataset is read from the Hub (push's --dataset only names it in the card)
DATASET_COMMANDS = ("train", "evaluate", "preprocess")


def check_hub_reachable(what: str, instead: str, offline_ok: bool = False) -> None:
    """The Hub (`HF_ENDPOINT`, default https://huggingface.co) answers one request within HUB_CHECK_TIMEOUT_S,
    no retries; else ConnectionError, one line naming `what`, the address and `HF_HUB_OFFLINE`, before anything
    heavy (huggingface_hub and datasets would otherwise retry for half a minute, or print a traceback).
    With `HF_HUB_OFFLINE` set: nothing is asked of the network; an error unless `offline_ok` (datasets then read
    their local cache)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    if constants.HF_HUB_OFFLINE:
        if offline_ok:
            return
        raise ConnectionError(
            f"{what}: HF_HUB_OFFLINE is set, so {constants.ENDPOINT} is not contacted; {instead}"
        )
    try:
        get_session().head(constants.ENDPOINT, timeout=HUB_CHECK_TIMEOUT_S, follow_redirects=False)
    except Exception as error:  # no network, DNS, refused, timeout, proxy
        raise ConnectionError(
            f"{what}: the Hub at {constants.ENDPOINT} cannot be reached ({type(error).__name__}); check the network "
            f"(or HF_ENDPOINT), set HF_HUB_OFFLINE=1 to work offline, or {instead}"
        ) from None


def _hub_cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False


def _check_hub_model(repo_id: str) -> None:
    """An owner/name model is in the local cache, or the Hub answers for its config.json within
    HUB_CHECK_TIMEOUT_S (one request, no retries); else one line saying why it cannot be loaded."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError, GatedRepoError, RepositoryNotFoundError

    if _hub_cached(repo_id):
        return
    not_local = f"{repo_id}: not a local directory, and this Hub model is not in the local cache"
    if constants.HF_HUB_OFFLINE:
        raise FileNotFoundError(f"{not_local} (HF_HUB_OFFLINE is set)")
    try:
        get_hf_file_metadata(hf_hub_url(repo_id, "config.json"), timeout=HUB_CHECK_TIMEOUT_S)
    except GatedRepoError:
        return  # reachable; from_pretrained reports what access it needs
    except RepositoryNotFoundError:
        raise FileNotFoundError(
            f"{repo_id}: not a local directory, and no such model on the Hub (or it is private: log in)"
        ) from None
    except EntryNotFoundError:
        raise FileNotFoundError(f"{repo_id}: a Hub repository without config.json, not a model") from None
    except Exception as error:  # no network, DNS, timeout, proxy: the Hub cannot be reached
        raise ConnectionError(f"{not_local} and the Hub cannot be reached ({type(error).__name__})") from None
