"""manage.py createnode NAME [--node-id N] [--interval S]: register a node, print its key."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from sensors.models import Node, Site


class Command(BaseCommand):
    help = (
        "Register a node (a device that posts readings) and print its 32-character write key "
        "as the last line. Only a hash of the key is stored: copy it now. "
        "With --rotate, give an existing node a new key (the old one stops working)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "name", help="Node name as the device posts it (emonhub `node`), e.g. emontx1"
        )
        parser.add_argument("--node-id", type=int, help="Radio node id (0-255), e.g. the JeeLib id")
        parser.add_argument(
            "--interval", type=int, default=10, help="Expected seconds between posts (default 10)"
        )
        parser.add_argument(
            "--protocol",
            choices=[c for c, _ in Node.Protocol.choices],
            default=Node.Protocol.EMONCMS,
        )
        parser.add_argument("--site", help="Site slug (default: the only site, if there is one)")
        parser.add_argument("--location", default="")
        parser.add_argument(
            "--rotate", action="store_true", help="Rotate the key of an existing node"
        )

    def handle(self, *args, **opts) -> None:
        name: str = opts["name"]
        if opts["rotate"]:
            # Names are unique per site: with several sites' nodes of this name, --site says which.
            same = Node.objects.filter(name=name)
            if opts["site"]:
                same = same.filter(site__slug=opts["site"])
            found = list(same[:2])
            if not found:
                raise CommandError(f"No node named '{name}'.")
            if len(found) > 1:
                raise CommandError(
                    f"Nodes named '{name}' are in several sites: choose with --site."
                )
            node = found[0]
            key = node.set_new_key()
            node.save(update_fields=["key_prefix", "key_hash"])
            self.stdout.write(f"New write key for node '{name}' (the old key no longer works):")
            self.stdout.write(key)
            return
        site = self._site(opts["site"])
        if Node.objects.filter(name=name, site=site).exists():
            raise CommandError(
                f"A node named '{name}' already exists (use --rotate for a new key)."
            )
        node = Node(
            name=name,
            node_id=opts["node_id"],
            interval=opts["interval"],
            protocol=opts["protocol"],
            location=opts["location"],
            site=site,
        )
        key = node.set_new_key()
        try:
            node.full_clean()
        except ValidationError as exc:
            problems = "; ".join(
                f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()
            )
            raise CommandError(f"Node not created: {problems}") from exc
        node.save()
        self.stdout.write(
            f"Created node '{node.name}' (id {node.pk}). Its write key, shown only once:"
        )
        self.stdout.write(key)

    def _site(self, slug: str | None) -> Site | None:
        if slug:
            site = Site.objects.filter(slug=slug).first()
            if site is None:
                raise CommandError(f"No site with slug '{slug}'.")
            return site
        sites = list(Site.objects.all()[:2])
        return sites[0] if len(sites) == 1 else None
