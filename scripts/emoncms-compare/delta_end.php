<?php
// emoncms feed_model delta_mode_next_interval logic, run on argv: end interval timezone
$end=(int)$argv[1]; $interval=$argv[2]; $timezone=$argv[3];
$date = new DateTime(); $date->setTimezone(new DateTimeZone($timezone)); $date->setTimestamp($end);
$date->modify("tomorrow midnight");
if ($interval=="weekly") $date->modify("next monday"); elseif ($interval=="monthly") $date->modify("first day of next month"); elseif ($interval=="annual") $date->modify("first day of january next year");
echo $date->getTimestamp();
