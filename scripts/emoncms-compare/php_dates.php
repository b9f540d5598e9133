<?php
// PHP DateTime::modify, as emoncms reads start/end date strings; argv: now timezone string...
$now = (int)$argv[1];
foreach (array_slice($argv, 3) as $s) {
$d = new DateTime(); $d->setTimezone(new DateTimeZone($argv[2])); $d->setTimestamp($now); $d->modify($s); echo $s, "|", $d->getTimestamp(), "\n"; }
